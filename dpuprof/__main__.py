from dpuprof.errors import exit_interrupted

if __name__ == "__main__":
    try:
        from dpuprof.cli import main
    except KeyboardInterrupt:
        exit_interrupted()
    main()
