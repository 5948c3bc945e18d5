from mtkit.cli import main

main()
