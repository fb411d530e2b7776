from gridxfer.cli.main import main

main()
