"""AWS commercial regions this project can deploy to, with where each one is.

Region codes and locations: the AWS "Regions and Availability Zones" page
(https://aws.amazon.com/about-aws/global-infrastructure/regions_az/) names the
metro area of every region; the coordinates are that metro area's city centre
(WGS 84, two decimals: about 1 km, far finer than routing needs). The test suite
checks that every code here is a region in botocore's own partition data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AwsRegion:
    code: str
    location: str
    latitude: float
    longitude: float


_REGIONS = (
    AwsRegion("us-east-1", "N. Virginia (Ashburn)", 39.04, -77.49),
    AwsRegion("us-east-2", "Ohio (Columbus)", 39.96, -83.00),
    AwsRegion("us-west-1", "N. California (San Francisco)", 37.77, -122.42),
    AwsRegion("us-west-2", "Oregon (Boardman)", 45.84, -119.70),
    AwsRegion("af-south-1", "Cape Town", -33.92, 18.42),
    AwsRegion("ap-east-1", "Hong Kong", 22.32, 114.17),
    AwsRegion("ap-east-2", "Taipei", 25.03, 121.57),
    AwsRegion("ap-south-1", "Mumbai", 19.08, 72.88),
    AwsRegion("ap-south-2", "Hyderabad", 17.39, 78.49),
    AwsRegion("ap-southeast-1", "Singapore", 1.35, 103.82),
    AwsRegion("ap-southeast-2", "Sydney", -33.87, 151.21),
    AwsRegion("ap-southeast-3", "Jakarta", -6.21, 106.85),
    AwsRegion("ap-southeast-4", "Melbourne", -37.81, 144.96),
    AwsRegion("ap-southeast-5", "Malaysia (Kuala Lumpur)", 3.14, 101.69),
    AwsRegion("ap-southeast-6", "New Zealand (Auckland)", -36.85, 174.76),
    AwsRegion("ap-southeast-7", "Thailand (Bangkok)", 13.76, 100.50),
    AwsRegion("ap-northeast-1", "Tokyo", 35.68, 139.69),
    AwsRegion("ap-northeast-2", "Seoul", 37.57, 126.98),
    AwsRegion("ap-northeast-3", "Osaka", 34.69, 135.50),
    AwsRegion("ca-central-1", "Canada (Montreal)", 45.50, -73.57),
    AwsRegion("ca-west-1", "Calgary", 51.05, -114.07),
    AwsRegion("eu-central-1", "Frankfurt", 50.11, 8.68),
    AwsRegion("eu-central-2", "Zurich", 47.38, 8.54),
    AwsRegion("eu-west-1", "Ireland (Dublin)", 53.35, -6.26),
    AwsRegion("eu-west-2", "London", 51.51, -0.13),
    AwsRegion("eu-west-3", "Paris", 48.86, 2.35),
    AwsRegion("eu-south-1", "Milan", 45.46, 9.19),
    AwsRegion("eu-south-2", "Spain (Zaragoza)", 41.65, -0.89),
    AwsRegion("eu-north-1", "Stockholm", 59.33, 18.07),
    AwsRegion("il-central-1", "Tel Aviv", 32.09, 34.78),
    AwsRegion("me-south-1", "Bahrain", 26.07, 50.56),
    AwsRegion("me-central-1", "UAE (Dubai)", 25.20, 55.27),
    AwsRegion("mx-central-1", "Mexico (Queretaro)", 20.59, -100.39),
    AwsRegion("sa-east-1", "Sao Paulo", -23.55, -46.63),
)

AWS_REGIONS: dict[str, AwsRegion] = {r.code: r for r in _REGIONS}

# Lambda@Edge functions, CloudFront Functions and ACM certificates for CloudFront
# all live in us-east-1, whatever regions the origins are in.
EDGE_CONTROL_REGION = "us-east-1"
