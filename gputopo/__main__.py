from gputopo.cli import main

main()
