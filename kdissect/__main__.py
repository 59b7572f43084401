from kdissect.cli import main

main()
