"""Before measuring: torch builds as a git history (wheels, build step, installs, the repository)."""
