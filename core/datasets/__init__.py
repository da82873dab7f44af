"""Dataset builders and importers: controlled, ruler-lite, HotpotQA/2Wiki, JSONL, LongBench."""
