from mlatui.cli import main

raise SystemExit(main())
