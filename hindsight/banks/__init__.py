"""Banks and memories: retain, consolidation, recall, stats, tags, and their API."""
