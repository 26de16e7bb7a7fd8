import sys

from robustness.campaign import main

sys.exit(main())
