"""`gputopo gather` archives and folders: bounded packing, checked reading held in memory."""
