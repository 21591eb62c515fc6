"""Test helpers shared by every area (local OpenAI-compatible server, fixtures)."""
