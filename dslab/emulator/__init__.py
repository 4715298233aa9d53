"""The embedded AWS stand-in: moto, with the gaps the lab needs closed (see patches)."""

import os

# moto's EC2 backend loads ~2,600 default AMIs (with random IDs) for every region it starts, each time a
# stand-in starts: ~0.4 s of CPU per lab for images the lab never launches (no EC2 instance in its
# templates). A user's own MOTO_EC2_LOAD_DEFAULT_AMIS still wins.
os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
