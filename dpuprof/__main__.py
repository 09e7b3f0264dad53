import sys


def interrupted() -> None:
    """Exit as an interrupted command (130) after a Ctrl-C or SIGINT that arrived before dpuprof's
    own handlers were in place (while importing, or parsing the command line): nothing was
    started or written, and ``record`` says so in the words it uses once its handlers are up."""
    if sys.argv[1:2] == ["record"]:
        print("dpuprof: stopped by SIGINT before the command started; nothing recorded", file=sys.stderr)
    sys.exit(130)


if __name__ == "__main__":
    try:
        from dpuprof.cli import main
    except KeyboardInterrupt:
        interrupted()
    main()
