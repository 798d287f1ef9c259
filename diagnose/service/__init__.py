"""The incident service: hooks in, diagnoses stored and posted back."""
