# training script: filled by issue 3
