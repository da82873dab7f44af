"""The dashboard pages' shared parts: widgets, display, help texts, links, state."""
