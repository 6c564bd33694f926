"""`gputopo watch`: link use per interval, its plan and summary."""
