"""Readers' notes in words: each ReadingNote code becomes a Finding here."""
