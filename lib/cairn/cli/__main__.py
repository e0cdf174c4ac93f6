from cairn.cli.main import main

raise SystemExit(main())
