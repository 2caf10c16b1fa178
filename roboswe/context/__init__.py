"""The context policy (DESIGN.md section 5): what fits in the next request, and the archive."""
