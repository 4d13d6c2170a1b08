"""``python -m hindsight.surfaces.cli …``: the ``hindsight`` command where its script is not on
the PATH (``python -m hindsight.surfaces.cli worker probe`` in a worker's image)."""

from hindsight.surfaces.cli import main

main()
