"""What acts on an AWS account or reads its service models: the zone doctor, zone IDs and S3 Express One Zone
zones, training images, the Express bucket operations, SDK export, and request validation against botocore."""
