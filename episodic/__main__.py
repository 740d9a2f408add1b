from episodic.cli.main import main

main()
