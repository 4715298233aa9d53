"""AWS's numbers with their sources: instance types, prices, service limits, what each storage serves, the compute
rates published for each accelerator. No model above them; everything else reads them from here."""
