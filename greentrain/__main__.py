"""`python -m greentrain` is the same as the `greentrain` command."""

from greentrain.cli import main

if __name__ == "__main__":
    main()
