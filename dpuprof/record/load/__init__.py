"""Loading the probes: the registry, bcc, the compile child and its cache, BTF, uprobe links."""
