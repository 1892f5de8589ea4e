"""horecon.io: ISMRMRD in (files written by our writer and by the ismrmrd package's own API),
NIfTI and ISMRMRD images out."""

import numpy as np
import pytest

ismrmrd = pytest.importorskip("ismrmrd", reason="the [io] extra (ismrmrd) is not installed")
pytest.importorskip("h5py", reason="the [io] extra (h5py) is not installed")
nib = pytest.importorskip("nibabel", reason="the [io] extra (nibabel) is not installed")

import horecon  # noqa: E402
import horecon.io as hio  # noqa: E402
import horecon.sim as sim  # noqa: E402


def _spiral_scan(n=16, coils=2, nz=1, fov=0.2):
    """A simulated 2D spiral (or stack of spirals) acquisition: (k (M, d), t (M,), data (M, L))."""
    if nz == 1:
        k, t = sim.spiral(n, fov, 1.0, 1e-5, 1.5e-3)
    else:
        k, t = sim.stack_of_spirals(n, nz, fov, fov / 2, 1.0, 1e-5, 1.5e-3)
    rng = np.random.default_rng(1)
    d = (rng.standard_normal((k.shape[0], coils)) + 1j * rng.standard_normal((k.shape[0], coils))).astype(np.complex64)
    return k, t, d


@pytest.mark.parametrize("nz", [1, 4])
@pytest.mark.parametrize("noise", [False, True])
def test_k_space_round_trip(tmp_path, rng, nz, noise):
    # 2D spiral and 3D stack of spirals, with and without a noise acquisition: samples, k
    # (float32 in the file), times (TE + j*dwell), geometry and noise come back as written
    n, coils, fov = 16, 3, 0.2
    k, t, d = _spiral_scan(n, coils, nz, fov)
    noise_samples = rng.complex(64, coils).astype(np.complex64) if noise else None
    matrix = (n, n, nz)
    fovs = (fov, fov, fov / 2 if nz > 1 else 0.004)
    position = rng.uniform(-0.03, 0.03, 3)
    hio.write_ismrmrd(
        tmp_path / "scan.h5", d, k, t, fov=fovs, matrix=matrix, noise=noise_samples, position=position
    )
    scan = hio.read_ismrmrd(tmp_path / "scan.h5")
    assert scan.model == "k"
    assert scan.data.shape == d.shape and scan.ncoils == coils
    np.testing.assert_array_equal(scan.data, d)
    np.testing.assert_allclose(scan.trajectory, k, rtol=1e-6, atol=1e-6 * np.abs(k).max())
    np.testing.assert_allclose(scan.times, t, rtol=0, atol=1e-12)
    assert scan.dwell == pytest.approx(1e-5, rel=1e-6) and scan.echo_time == pytest.approx(t[0])
    assert scan.matrix == matrix and np.allclose(scan.fov, fovs)
    assert scan.encoded_matrix == matrix and np.allclose(scan.encoded_fov, fovs)
    np.testing.assert_allclose(scan.position, position, atol=1e-9)
    assert scan.readouts.sum() == k.shape[0]
    if nz > 1:
        assert scan.readouts.size == nz  # one readout per partition: the times restart
    if noise:
        np.testing.assert_array_equal(scan.noise, noise_samples)
        assert scan.noise_covariance().shape == (coils, coils)
    else:
        assert scan.noise is None
        with pytest.raises(hio.IsmrmrdError, match="no noise acquisitions"):
            scan.noise_covariance()


@pytest.mark.parametrize("nz", [1, 3])
def test_solid_harmonics_round_trip_and_plan(tmp_path, rng, nz):
    # 16 field-camera terms as trajectory dimensions (a 2D spiral, a 3D stack of spirals) on an
    # oblique, off-centre grid, with a noise scan; the plan built from the file gives the same
    # operator as one built from the arrays that were written (physical positions)
    n, fov = 12, 0.2
    if nz == 1:
        k, t = sim.spiral(n, fov, 1.0, 1e-5, 2e-3)
        fovs = (fov, fov, 0.005)
    else:
        k, t = sim.stack_of_spirals(n, nz, fov, 0.03, 1.0, 1e-5, 2e-3)
        fovs = (fov, fov, 0.03)
    coefficients = sim.field_coefficients(k, 1e-5)
    position = np.array([0.01, -0.02, 0.03])
    rotation = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    if np.linalg.det(rotation) < 0:
        rotation[:, 2] *= -1
    shape = (n, n) if nz == 1 else (n, n, nz)
    image = rng.complex(*shape)
    geometry = dict(position=position, read_dir=rotation[:, 0], phase_dir=rotation[:, 1], slice_dir=rotation[:, 2])
    # simulate with float32-rounded coefficients (what the file keeps)
    stored = coefficients.astype(np.float32).astype(np.float64)
    logical = hio.Scan.logical_positions(_geometry_only((n, n, nz), fovs))
    positions = position + logical @ rotation.T
    with horecon.Plan(shape, nsamples=k.shape[0], precision="double") as plan:
        plan.set_positions(positions)
        plan.set_solid_harmonics(stored)
        d = plan.forward(image)
    noise = rng.complex(30, 1).astype(np.complex64)
    hio.write_ismrmrd(
        tmp_path / "ho.h5", d, coefficients, t, fov=fovs, matrix=(n, n, nz),
        model="solid_harmonics", noise=noise, **geometry,
    )
    scan = hio.read_ismrmrd(tmp_path / "ho.h5")
    np.testing.assert_array_equal(scan.noise, noise)
    assert scan.shape == shape and scan.readouts.size == nz
    assert scan.model == "solid_harmonics" and scan.trajectory.shape == (k.shape[0], 16)
    np.testing.assert_array_equal(scan.trajectory, stored)
    np.testing.assert_allclose(scan.positions(), positions, atol=1e-7)
    with scan.plan(precision="double") as plan:
        again = plan.forward(image)
    err = np.linalg.norm(again - d) / np.linalg.norm(d)
    print(f"forward from the file vs from the arrays: {err:.1e}")
    assert err < 1e-6


def _geometry_only(matrix, fov):
    return hio.Scan(
        data=np.zeros((1, 1), np.complex64), trajectory=np.zeros((1, 2)), model="k", times=np.zeros(1),
        readouts=np.ones(1, int), dwell=1.0, echo_time=0.0, matrix=matrix, fov=np.asarray(fov, float),
        encoded_matrix=matrix, encoded_fov=np.asarray(fov, float), position=np.zeros(3),
        read_dir=np.eye(3)[0], phase_dir=np.eye(3)[1], slice_dir=np.eye(3)[2],
    )


def _header(coils, matrix=(8, 8, 1), fov_mm=(200.0, 200.0, 5.0), units="1/m", model="k", te_ms=2.0):
    """An ISMRMRD XML header made with the ismrmrd package's schema classes."""
    xsd = ismrmrd.xsd
    space = xsd.encodingSpaceType(
        matrixSize=xsd.matrixSizeType(x=matrix[0], y=matrix[1], z=matrix[2]),
        fieldOfView_mm=xsd.fieldOfViewMm(x=fov_mm[0], y=fov_mm[1], z=fov_mm[2]),
    )
    strings = []
    if model is not None:
        strings.append(xsd.userParameterStringType(name="horecon.model", value=model))
    if units is not None:
        strings.append(xsd.userParameterStringType(name="horecon.units", value=units))
    header = xsd.ismrmrdHeader(
        experimentalConditions=xsd.experimentalConditionsType(H1resonanceFrequency_Hz=63_870_000),
        acquisitionSystemInformation=xsd.acquisitionSystemInformationType(receiverChannels=coils),
        encoding=[
            xsd.encodingType(
                encodedSpace=space,
                reconSpace=space,
                encodingLimits=xsd.encodingLimitsType(),
                trajectory=xsd.trajectoryType.RADIAL,
                trajectoryDescription=xsd.trajectoryDescriptionType(identifier="test", userParameterString=strings),
            )
        ],
        sequenceParameters=xsd.sequenceParametersType(TE=[te_ms]),
    )
    return header.toXML("utf-8")


def _write_radial_with_ismrmrd_api(path, rng, *, coils=2, spokes=6, samples=32, header=None, noise=True,
                                   slices=(0,), dims=2, discard_pre=2, dwell_us=4.0):
    """A radial scan written with the ismrmrd package's own Dataset/Acquisition API (not
    horecon's writer): k in cycles/m, center_sample in the middle of each spoke."""
    kmax = 0.5 * 8 / 0.2  # cycles/m
    written = []
    with ismrmrd.Dataset(str(path), "dataset", create_if_needed=True) as dset:
        dset.write_xml_header(header if header is not None else _header(coils))
        if noise:
            acq = ismrmrd.Acquisition.from_array(rng.complex(coils, 50).astype(np.complex64), None, sample_time_us=dwell_us)
            acq.set_flag(ismrmrd.ACQ_IS_NOISE_MEASUREMENT)
            dset.append_acquisition(acq)
        for s in slices:
            for spoke in range(spokes):
                angle = np.pi * spoke / spokes
                radius = np.linspace(-kmax, kmax, samples, endpoint=False)
                traj = np.column_stack([radius * np.cos(angle), radius * np.sin(angle)] + [radius * 0] * (dims - 2))
                data = rng.complex(coils, samples).astype(np.complex64)
                acq = ismrmrd.Acquisition.from_array(
                    data, traj.astype(np.float32), sample_time_us=dwell_us, center_sample=samples // 2,
                    discard_pre=discard_pre, read_dir=(1.0, 0.0, 0.0), phase_dir=(0.0, 1.0, 0.0),
                    slice_dir=(0.0, 0.0, 1.0), position=(0.0, 0.0, 10.0 * s),
                )
                acq.idx.slice = s
                dset.append_acquisition(acq)
                written.append((s, data, traj.astype(np.float32)))
        if noise:  # a navigator, a phase-correction and a dummy scan after them: skipped
            for flag in (ismrmrd.ACQ_IS_NAVIGATION_DATA, ismrmrd.ACQ_IS_PHASECORR_DATA, ismrmrd.ACQ_IS_DUMMYSCAN_DATA):
                nav = ismrmrd.Acquisition.from_array(rng.complex(coils, 8).astype(np.complex64), np.zeros((8, dims), np.float32))
                nav.set_flag(flag)
                dset.append_acquisition(nav)
    return written


def test_reads_a_file_written_by_the_ismrmrd_package(tmp_path, rng):
    path = tmp_path / "radial.h5"
    written = _write_radial_with_ismrmrd_api(path, rng)
    scan = hio.read_ismrmrd(path)
    keep = slice(2, None)  # discard_pre = 2
    expected_data = np.concatenate([d.T[keep] for _, d, _ in written])
    expected_k = 2 * np.pi * np.concatenate([k[keep] for _, _, k in written]).astype(np.float64)
    np.testing.assert_array_equal(scan.data, expected_data)
    np.testing.assert_allclose(scan.trajectory, expected_k, rtol=1e-12)
    j = np.arange(2, 32)
    np.testing.assert_allclose(scan.times, np.tile(2e-3 + (j - 16) * 4e-6, 6), atol=1e-12)
    assert scan.noise.shape == (50, 2) and scan.noise_dwell == pytest.approx(4e-6)
    assert scan.readouts.tolist() == [30] * 6
    with scan.plan() as plan:
        plan.set_sensitivities(np.ones((64, 2)))
        back = plan.adjoint(scan.data)
    assert back.shape == (8, 8) and np.isfinite(back).all()


def test_normalized_units_and_overrides(tmp_path, rng):
    # no units in the header: an error naming the field; units='normalized' scales by matrix/fov
    path = tmp_path / "plain.h5"
    written = _write_radial_with_ismrmrd_api(path, rng, header=_header(2, units=None, model=None), noise=False)
    with pytest.raises(hio.IsmrmrdError, match="horecon.model"):
        hio.read_ismrmrd(path)
    with pytest.raises(hio.IsmrmrdError, match="horecon.units"):
        hio.read_ismrmrd(path, model="k")
    scan = hio.read_ismrmrd(path, model="k", units="normalized")
    k = np.concatenate([k[2:] for _, _, k in written]).astype(np.float64)
    np.testing.assert_allclose(scan.trajectory, 2 * np.pi * k * 8 / 0.2, rtol=1e-12)
    assert hio.read_ismrmrd(path, model="k", units="rad/m").trajectory == pytest.approx(k)


def test_missing_and_mismatched_fields_are_named(tmp_path, rng):
    import h5py

    with pytest.raises(FileNotFoundError):
        hio.read_ismrmrd(tmp_path / "nothing.h5")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(hio.IsmrmrdError, match="not an HDF5 file"):
        hio.read_ismrmrd(tmp_path / "text.h5")
    with h5py.File(tmp_path / "empty.h5", "w") as f:
        f.create_group("other")
    with pytest.raises(hio.IsmrmrdError, match="no ISMRMRD dataset 'dataset'.*other"):
        hio.read_ismrmrd(tmp_path / "empty.h5")
    with h5py.File(tmp_path / "noxml.h5", "w") as f:
        f.create_group("dataset")
    with pytest.raises(hio.IsmrmrdError, match="dataset/xml"):
        hio.read_ismrmrd(tmp_path / "noxml.h5")
    # the header says 4 receivers, the acquisitions have 2
    _write_radial_with_ismrmrd_api(tmp_path / "coils.h5", rng, header=_header(4))
    with pytest.raises(hio.IsmrmrdError, match="receiverChannels = 4.*active_channels = 2"):
        hio.read_ismrmrd(tmp_path / "coils.h5")
    # two slices: select one
    _write_radial_with_ismrmrd_api(tmp_path / "slices.h5", rng, slices=(0, 1))
    with pytest.raises(hio.IsmrmrdError, match=r"idx.slice.*select=\{'slice': 0\}"):
        hio.read_ismrmrd(tmp_path / "slices.h5")
    one = hio.read_ismrmrd(tmp_path / "slices.h5", select={"slice": 1})
    assert one.readouts.size == 6 and one.position[2] == pytest.approx(0.01)
    # 3 trajectory dimensions for a k model on this header are fine; 3 for solid harmonics are not
    _write_radial_with_ismrmrd_api(tmp_path / "dims.h5", rng, dims=3, header=_header(2, model="solid_harmonics"))
    with pytest.raises(hio.IsmrmrdError, match="trajectory_dimensions = 3.*solid_harmonics"):
        hio.read_ismrmrd(tmp_path / "dims.h5")
    # no trajectory at all (Cartesian raw data)
    with ismrmrd.Dataset(str(tmp_path / "cart.h5"), "dataset", create_if_needed=True) as dset:
        dset.write_xml_header(_header(1))
        dset.append_acquisition(ismrmrd.Acquisition.from_array(rng.complex(1, 8).astype(np.complex64), None, sample_time_us=5.0))
    with pytest.raises(hio.IsmrmrdError, match="trajectory_dimensions = 0"):
        hio.read_ismrmrd(tmp_path / "cart.h5")
    # a zero dwell time
    _write_radial_with_ismrmrd_api(tmp_path / "dwell.h5", rng, dwell_us=0.0, noise=False)
    with pytest.raises(hio.IsmrmrdError, match="sample_time_us"):
        hio.read_ismrmrd(tmp_path / "dwell.h5")
    # a header that is not ISMRMRD XML
    with ismrmrd.Dataset(str(tmp_path / "badxml.h5"), "dataset", create_if_needed=True) as dset:
        dset.write_xml_header(b"<ismrmrdHeader><nonsense/></ismrmrdHeader>")
        dset.append_acquisition(ismrmrd.Acquisition.from_array(rng.complex(1, 8).astype(np.complex64), None))
    with pytest.raises(hio.IsmrmrdError, match="XML header"):
        hio.read_ismrmrd(tmp_path / "badxml.h5")


def test_writer_refuses_what_ismrmrd_cannot_store(tmp_path):
    k, t, d = _spiral_scan(8, 1)
    bad_times = t.copy()
    bad_times[5:] += 1e-3
    with pytest.raises(ValueError, match="times cannot be stored"):
        hio.write_ismrmrd(tmp_path / "x.h5", d, k, bad_times, fov=0.2, matrix=(8, 8, 1))
    with pytest.raises(ValueError, match="model 'solid_harmonics' needs"):
        hio.write_ismrmrd(tmp_path / "x.h5", d, k, t, fov=0.2, matrix=(8, 8, 1), model="solid_harmonics")
    long = np.zeros((70000, 2))
    with pytest.raises(ValueError, match="65535"):
        hio.write_ismrmrd(tmp_path / "x.h5", np.zeros(70000), long, np.arange(70000) * 1e-6, fov=0.2, matrix=(8, 8, 1))


def test_nifti_affine_maps_indices_to_the_voxel_positions(tmp_path, rng):
    # an oblique, off-centre 3D grid with odd and even sizes: the affine applied to every index
    # gives the voxel positions (LPS, m) in RAS+ mm
    rotation = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    scan = _geometry_only((5, 4, 3), (0.05, 0.04, 0.03))
    scan.position = rng.uniform(-0.05, 0.05, 3)
    scan.read_dir, scan.phase_dir, scan.slice_dir = rotation.T
    affine = hio.nifti_affine(scan)
    index = np.stack(np.meshgrid(np.arange(5), np.arange(4), np.arange(3), indexing="ij"), -1).reshape(-1, 3, order="F")
    world = (affine @ np.c_[index, np.ones(len(index))].T).T[:, :3]
    lps_mm = scan.positions() * 1e3
    np.testing.assert_allclose(world, lps_mm * [-1, -1, 1], atol=1e-9)
    # an axial slice without rotation: x grows to the patient's left = -x in RAS
    axial = _geometry_only((4, 4, 1), (0.2, 0.2, 0.005))
    np.testing.assert_allclose(np.diag(hio.nifti_affine(axial))[:3], [-50.0, -50.0, 5.0])
    # written and read back with nibabel: data, affine, qform/sform codes
    image = rng.complex(5, 4, 3).astype(np.complex64)
    hio.write_nifti(tmp_path / "x.nii.gz", image, scan)
    back = nib.load(tmp_path / "x.nii.gz")
    np.testing.assert_allclose(back.affine, affine, atol=1e-4)
    assert int(back.header["qform_code"]) == 1 and int(back.header["sform_code"]) == 1
    np.testing.assert_allclose(np.asanyarray(back.dataobj), np.abs(image), rtol=1e-6)
    hio.write_nifti(tmp_path / "c.nii", image.ravel(order="F"), scan, magnitude=False)
    np.testing.assert_array_equal(np.asanyarray(nib.load(tmp_path / "c.nii").dataobj), image)


def test_ismrmrd_image_out(tmp_path, rng):
    scan = _geometry_only((6, 5, 1), (0.06, 0.05, 0.004))
    scan.position = np.array([0.0, 0.01, 0.02])
    image = rng.complex(6, 5).astype(np.complex64)
    hio.write_ismrmrd_image(tmp_path / "img.h5", image, scan)
    hio.write_ismrmrd_image(tmp_path / "img.h5", 2 * image, scan)
    with ismrmrd.Dataset(str(tmp_path / "img.h5"), "dataset", create_if_needed=False) as dset:
        assert dset.number_of_images("image_0") == 2
        first = dset.read_image("image_0", 0)
        second = dset.read_image("image_0", 1)
    assert first.data.shape == (1, 1, 5, 6)  # (channels, z, y, x)
    np.testing.assert_array_equal(first.data[0, 0].T, image)
    np.testing.assert_array_equal(second.data[0, 0].T, 2 * image)
    head = first.getHead()
    assert tuple(head.matrix_size) == (6, 5, 1)
    np.testing.assert_allclose(head.position[:], [0.0, 10.0, 20.0], atol=1e-5)
    np.testing.assert_allclose(head.field_of_view[:], [60.0, 50.0, 4.0], atol=1e-4)


def test_damaged_files_and_odd_fields_are_ismrmrd_errors(tmp_path, rng):
    """A discard longer than the readout drops it (a negative slice stop kept
    samples); malformed structures and damaged bytes raise IsmrmrdError (they
    escaped as TypeError, KeyError, OSError, ...); an image of another shape
    is refused, not reshaped."""
    import h5py

    # discard_pre = 40 > 32 samples on every spoke: every sample is discarded
    _write_radial_with_ismrmrd_api(tmp_path / "discard.h5", rng, discard_pre=40)
    with pytest.raises(hio.IsmrmrdError, match="every sample is discarded"):
        hio.read_ismrmrd(tmp_path / "discard.h5")
    for name, build in (
        ("xml_scalar", lambda g: g.create_dataset("xml", data=b"<x/>")),
        ("xml_group", lambda g: g.create_group("xml")),
    ):
        with h5py.File(tmp_path / f"{name}.h5", "w") as f:
            g = f.create_group("dataset")
            build(g)
            g.create_dataset("data", data=np.zeros(3))
        with pytest.raises(hio.IsmrmrdError):
            hio.read_ismrmrd(tmp_path / f"{name}.h5")
    good = tmp_path / "radial.h5"
    _write_radial_with_ismrmrd_api(good, rng)
    raw = bytearray(good.read_bytes())
    damaged = 0
    for seed in range(40):  # flip bytes past the superblock: IsmrmrdError or a (rarely) intact read
        bad = bytearray(raw)
        for at in np.random.default_rng(seed).integers(64, len(raw), 8):
            bad[at] ^= 0xFF
        (tmp_path / "bad.h5").write_bytes(bytes(bad))
        try:
            hio.read_ismrmrd(tmp_path / "bad.h5")
        except hio.IsmrmrdError:
            damaged += 1
    assert damaged > 0
    geometry = dict(matrix=(5, 4, 3), fov=(0.05, 0.04, 0.03), position=(0, 0, 0), read_dir=(1, 0, 0),
                    phase_dir=(0, 1, 0), slice_dir=(0, 0, 1))
    image = rng.complex(5, 4, 3)
    with pytest.raises(ValueError, match=r"shape \(60, 1\)"):
        hio.write_nifti(tmp_path / "col.nii", image.ravel(order="F")[:, None], **geometry)
    with pytest.raises(ValueError, match=r"shape \(4, 5, 3\)"):
        hio.write_nifti(tmp_path / "t.nii", image.transpose(1, 0, 2), **geometry)
    hio.write_nifti(tmp_path / "flat.nii", image.ravel(order="F"), magnitude=False, **geometry)
    import nibabel

    np.testing.assert_array_equal(np.asanyarray(nibabel.load(tmp_path / "flat.nii").dataobj), image.astype(np.complex64))
