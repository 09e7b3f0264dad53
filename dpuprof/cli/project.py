"""``dpuprof project``: offload projection (filled in by the project issue)."""

import click


@click.command()
def project():
    """Project what a DPU would free on a recording."""
    raise click.ClickException("not implemented yet")
