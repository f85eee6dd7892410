import sys

from tokjit.cli import main

sys.exit(main())
