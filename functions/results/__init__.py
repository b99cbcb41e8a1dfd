"""The probe results consumer: Lambda Destinations records from SQS into DynamoDB,
with schema drift, cross-region skew and availability alerts.

Relative imports only, so the package works as ``functions.results`` in tests and
as ``results`` at the root of the Lambda zip.
"""
