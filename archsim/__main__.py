"""`python -m archsim` is the same as the `archsim` console script."""

from archsim.cli import main

raise SystemExit(main())
