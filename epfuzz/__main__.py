from epfuzz.cli import main

raise SystemExit(main())
