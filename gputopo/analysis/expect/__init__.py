"""Expected and measured GB/s per link, in one place with one rule; what a performance state says of a link."""
