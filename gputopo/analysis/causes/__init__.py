"""The one engine of causes: every finding worded once, whichever door its evidence came through (scan's diagnose, doctor)."""
