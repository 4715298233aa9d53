"""The answer to a question, computed once: its premise, the provisioning each source is priced on (``sizing``), the
decision between them, and the experiment's scenarios answered the same way."""
