import botocore.session
from hypothesis import given
from hypothesis import strategies as st

from edge.regions import AWS_REGIONS


def test_every_region_is_an_aws_commercial_region_in_botocore():
    partitions = botocore.session.get_session().get_data("endpoints")["partitions"]
    aws = next(p for p in partitions if p["partition"] == "aws")
    assert set(AWS_REGIONS) <= set(aws["regions"]), set(AWS_REGIONS) - set(aws["regions"])


@given(st.sampled_from(sorted(AWS_REGIONS)))
def test_region_coordinates_are_on_the_globe(code):
    region = AWS_REGIONS[code]
    assert region.code == code
    assert -90 <= region.latitude <= 90 and -180 <= region.longitude <= 180
