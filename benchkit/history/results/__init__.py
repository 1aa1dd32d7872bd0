"""After measuring: asv's results read back, and backfill's counts written into them."""
