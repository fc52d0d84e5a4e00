from kvlint.face.cli import main

main()
