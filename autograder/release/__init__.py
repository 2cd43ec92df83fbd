"""The release step: one assignment source folder -> solutions, student template, nbgrader source, references.

Modules, one job each: `spec` (assignment.toml), `markers` (solution regions), `includes` (`# @include` directives),
`notebook` (notebook composition and nbgrader's own preprocessors), `handout`, `leaks` (leak guard), `references`
(hidden reference arrays), `manifest`, `writer` (byte-exact writes and drift checks), `command` (orchestration).
"""
