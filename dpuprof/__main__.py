import sys

try:
    from dpuprof.cli import main
except KeyboardInterrupt:  # Ctrl-C while still importing: exit like an interrupted command
    sys.exit(130)

if __name__ == "__main__":
    main()
