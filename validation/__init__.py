"""Published training runs (runs.toml), shipped as package data so that `planner validate` works from an installed
package (planner.published_runs)."""
