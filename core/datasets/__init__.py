"""Dataset builders and importers: controlled generator, ruler-lite, HotpotQA/2Wiki, JSONL."""
