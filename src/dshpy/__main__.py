"""``python -m dshpy``: the ``dshpy`` command line."""

from dshpy.cli import main

if __name__ == "__main__":
    main()
