! test_gpuarena.F90 - the Fortran module `gpuarena' against the host arena:
! alloc, writing through c_f_pointer, free, stats, the status of a double
! free, strings, and the layout of gpuarena_stats_t against the C struct.
! Exits non-zero (error stop) on the first failure.
program test_gpuarena
  use, intrinsic :: iso_c_binding
  use gpuarena
  implicit none

  interface
     function stats_size() bind(c, name='ga_ftest_stats_size') result(n)
       import :: c_size_t
       integer(c_size_t) :: n
     end function stats_size
     function stats_offset(field) bind(c, name='ga_ftest_stats_offset') result(n)
       import :: c_int, c_size_t
       integer(c_int), value :: field
       integer(c_size_t) :: n
     end function stats_offset
     function stream_host() bind(c, name='ga_ftest_stream_host') result(s)
       import :: c_ptr
       type(c_ptr) :: s
     end function stream_host
  end interface

  integer, parameter :: n = 1000
  character(len=256) :: conf
  integer :: unit
  type(c_ptr) :: a, p, q, priv
  type(gpuarena_stats_t), target :: st0, st1
  type(gpuarena_total_t) :: tot
  real(c_double), pointer :: x(:)
  integer(c_int) :: status, kind, device
  integer :: i

  call layout()

  ! A configuration path in a fixed-length variable, blank-padded: the
  ! file it names is read (the blanks went to C, and the file was not
  ! found).
  conf = 'test_gpuarena.conf'
  open (newunit=unit, file=conf, status='replace', action='write')
  write (unit, '(a)') '[host]'
  close (unit)
  status = gpuarena_init(conf)
  open (newunit=unit, file=conf, status='old')
  close (unit, status='delete')
  call check(status, 'gpuarena_init(a blank-padded path)')

  call expect(gpuarena_version() /= '', 'gpuarena_version is empty')
  print '(a, a)', 'libgpuarena ', gpuarena_version()

  status = gpuarena_get(GPUARENA_HOST, 0, a)
  call check(status, 'gpuarena_get(GPUARENA_HOST)')
  call expect(c_associated(a), 'host arena is NULL')
  status = gpuarena_kind(a, kind, device)
  call check(status, 'gpuarena_kind')
  call expect(kind == GPUARENA_HOST .and. device == 0, 'gpuarena_kind: wrong kind or device')
  call check(gpuarena_stats(a, st0), 'gpuarena_stats')

  ! Allocate, write through a Fortran pointer, read back.
  status = gpuarena_alloc(a, int(n * c_sizeof(1.0_c_double), c_size_t), c_null_ptr, p)
  call check(status, 'gpuarena_alloc')
  call expect(c_associated(p), 'gpuarena_alloc returned NULL')
  call c_f_pointer(p, x, [n])
  do i = 1, n
     x(i) = real(i, c_double) * 0.5_c_double
  end do
  do i = 1, n
     call expect(nint(x(i) * 2) == i, 'read back a different value')
  end do

  call check(gpuarena_stats(a, st1), 'gpuarena_stats')
  call expect(st1%allocs == st0%allocs + 1, 'stats: allocs did not grow by one')
  call expect(st1%live_blocks == st0%live_blocks + 1, 'stats: live_blocks did not grow by one')
  call expect(st1%requested - st0%requested == int(n, c_int64_t) * 8, 'stats: requested is not 8000 more')
  call expect(st1%in_use - st0%in_use >= int(n, c_int64_t) * 8, 'stats: in_use is not 8000 more')
  call expect(st1%reserved >= st1%in_use, 'stats: reserved < in_use')
  call expect(all(st1%spare_ == 0), 'stats: spare_ is not zero')
  ! The host total: this one arena, its reserved bytes.
  call check(gpuarena_stats_total(GPUARENA_HOST, 0, tot), 'gpuarena_stats_total')
  call expect(tot%arenas == 1, 'stats_total: not one host arena')
  call expect(tot%reserved == st1%reserved, 'stats_total: reserved is not the arena''s')
  call expect(tot%reserved_peak >= tot%reserved, 'stats_total: peak below reserved')
  call expect(all(tot%spare_ == 0), 'stats_total: spare_ is not zero')
  call expect(gpuarena_stats_total(GPUARENA_HOST, -1, tot) == GPUARENA_ERR_INVALID_DEVICE, &
       'gpuarena_stats_total of device -1 did not fail with GPUARENA_ERR_INVALID_DEVICE')
  call check(gpuarena_stats_total_reset_peak(GPUARENA_HOST, 0), 'gpuarena_stats_total_reset_peak')

  ! Size 0 gives NULL; a second block is distinct from the first.
  call check(gpuarena_alloc(a, 0_c_size_t, c_null_ptr, q), 'gpuarena_alloc(0)')
  call expect(.not. c_associated(q), 'gpuarena_alloc(0) did not return NULL')
  call check(gpuarena_alloc(a, 64_c_size_t, c_null_ptr, q), 'gpuarena_alloc(64)')
  call expect(.not. c_associated(p, q), 'two live blocks at the same address')
  call check(gpuarena_record_stream(a, q, c_null_ptr), 'gpuarena_record_stream')
  status = gpuarena_prefetch(a, q, 64_c_size_t, GPUARENA_CPU, c_null_ptr)
  call expect(status == GPUARENA_ERR_NOT_SUPPORTED, 'gpuarena_prefetch on a host arena: ' &
       // gpuarena_strerror(status))
  call check(gpuarena_free(a, q, c_null_ptr), 'gpuarena_free(q)')

  ! No stream: the header's value, and a block made and freed with it.
  call expect(c_associated(GPUARENA_STREAM_HOST, stream_host()), &
       'GPUARENA_STREAM_HOST is not the header''s')
  call check(gpuarena_alloc(a, 64_c_size_t, GPUARENA_STREAM_HOST, q), 'gpuarena_alloc(no stream)')
  call check(gpuarena_free(a, q, GPUARENA_STREAM_HOST), 'gpuarena_free(no stream)')

  ! Free, then free again: a distinct status, the stats untouched.
  call check(gpuarena_free(a, p, c_null_ptr), 'gpuarena_free')
  call check(gpuarena_stats(a, st1), 'gpuarena_stats')
  call expect(st1%frees == st0%frees + 3, 'stats: frees did not grow by three')
  call expect(st1%live_blocks == st0%live_blocks, 'stats: live_blocks not back')
  call expect(st1%requested == st0%requested, 'stats: requested not back')
  status = gpuarena_free(a, p, c_null_ptr)
  call expect(status == GPUARENA_ERR_DOUBLE_FREE, 'double free returned "' &
       // gpuarena_strerror(status) // '"')
  call expect(gpuarena_last_error() /= '', 'gpuarena_last_error is empty after a failure')
  print '(a, a)', 'double free: ', gpuarena_last_error()
  call check(gpuarena_stats(a, st0), 'gpuarena_stats')
  call expect(st0%frees == st1%frees, 'stats: a double free changed the count of frees')
  call check(gpuarena_free(a, c_null_ptr, c_null_ptr), 'gpuarena_free(NULL)')
  call check(gpuarena_trim(a, 0_c_size_t), 'gpuarena_trim')
  call check(gpuarena_check(a), 'gpuarena_check')
  call check(gpuarena_stats_reset_peaks(a), 'gpuarena_stats_reset_peaks')

  ! Strings and errors.
  call expect(gpuarena_strerror(GPUARENA_ERR_DOUBLE_FREE) /= gpuarena_strerror(GPUARENA_SUCCESS), &
       'gpuarena_strerror gives one text for two codes')
  call expect(gpuarena_get(GPUARENA_KIND_COUNT, 0, q) == GPUARENA_ERR_INVALID_ARGUMENT, &
       'gpuarena_get of a bad kind did not fail with GPUARENA_ERR_INVALID_ARGUMENT')
  status = gpuarena_get(GPUARENA_PINNED, 0, q)
  print '(a, a)', 'pinned arena of GPU 0: ', gpuarena_strerror(status)

  ! A private arena with options, destroyed.
  call check(gpuarena_create(GPUARENA_HOST, 0, priv, 'max_cached=1M'), 'gpuarena_create')
  call check(gpuarena_alloc(priv, 100_c_size_t, c_null_ptr, p), 'gpuarena_alloc(private)')
  call expect(gpuarena_destroy(priv) == GPUARENA_ERR_BUSY, 'destroy of a busy arena')
  call check(gpuarena_free(priv, p, c_null_ptr), 'gpuarena_free(private)')
  call check(gpuarena_set(priv, 'max_cached=none,max_reserved=64M'), 'gpuarena_set')
  call expect(gpuarena_set(priv, 'round=4096') == GPUARENA_ERR_INVALID_ARGUMENT, &
       'gpuarena_set of a key fixed at creation did not fail with GPUARENA_ERR_INVALID_ARGUMENT')
  call check(gpuarena_destroy(priv), 'gpuarena_destroy')
  call expect(gpuarena_create(GPUARENA_HOST, 0, priv, 'no_such_key=1') == GPUARENA_ERR_CONFIG, &
       'gpuarena_create with an unknown key did not fail with GPUARENA_ERR_CONFIG')

  print '(a)', 'PASS: the Fortran module works'

contains

  subroutine check(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what

    if (status /= GPUARENA_SUCCESS) then
       print '(a, a, a, a)', what, ': ', gpuarena_strerror(status), ': ' // gpuarena_last_error()
       error stop 1
    end if
  end subroutine check

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what

    if (.not. ok) then
       print '(a, a)', 'FAIL: ', what
       error stop 1
    end if
  end subroutine expect

  ! The Fortran type has the size and field offsets of the C struct.
  subroutine layout()
    type(gpuarena_stats_t), target :: s

    call expect(c_sizeof(s) == stats_size(), 'gpuarena_stats_t: Fortran and C sizes differ')
    call expect(off(s, c_loc(s%requested)) == stats_offset(0), 'offset of requested differs')
    call expect(off(s, c_loc(s%allocs)) == stats_offset(1), 'offset of allocs differs')
    call expect(off(s, c_loc(s%trims)) == stats_offset(2), 'offset of trims differs')
    call expect(off(s, c_loc(s%device_free)) == stats_offset(3), 'offset of device_free differs')
    call expect(off(s, c_loc(s%spare_)) == stats_offset(4), 'offset of spare_ differs')
    call expect(off(s, c_loc(s%retired_cached)) == stats_offset(5), 'offset of retired_cached differs')
    call expect(off(s, c_loc(s%deferred_frees)) == stats_offset(6), 'offset of deferred_frees differs')
  end subroutine layout

  ! The offset of the field at p in s.
  integer(c_size_t) function off(s, p)
    type(gpuarena_stats_t), target, intent(in) :: s
    type(c_ptr), intent(in) :: p
    integer(c_intptr_t) :: base, at

    base = transfer(c_loc(s), base)
    at = transfer(p, at)
    off = int(at - base, c_size_t)
  end function off

end program test_gpuarena
