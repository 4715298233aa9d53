"""One Construct per logical unit of the lab; stacks compose them."""
