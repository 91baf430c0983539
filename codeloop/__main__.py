from codeloop.cli import main

main()
