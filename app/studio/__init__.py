"""The Studio: scripts with several voices, chapters and pauses, rendered line by line into projects
that persist, and exported as audiobooks (app/ui/studio.py is its tab)."""
