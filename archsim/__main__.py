"""`python -m archsim` is the same as the `archsim` console script."""

from archsim.cli import console_main

raise SystemExit(console_main())
