from trainer.project.cli import main

raise SystemExit(main())
