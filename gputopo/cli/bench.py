"""gputopo bench: registered on the app in gputopo.cli (being built)."""
