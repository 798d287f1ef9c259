"""The stages of a triage, values in and values out: :mod:`.parse` (a file into its Evidence) and :mod:`.find`
(symptoms, frames, extractors, derived findings). :mod:`diagnose.pipeline` calls them in order; how the work is
spread over processes is :mod:`diagnose.runtime`'s, which imports these and never the reverse."""
