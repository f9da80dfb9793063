! gpuarena.F90 - the Fortran 2008 module `gpuarena': the core of the C API
! of libgpuarena (include/gpuarena.h) through iso_c_binding.  See
! gpuarena_fortran(3).
!
! Arenas, pointers and streams are type(c_ptr); sizes are integer(c_size_t);
! status codes, kinds and devices are integer(c_int) with the values of the
! C enumerations (part of the ABI, they never change).  Every function
! returns a status (GPUARENA_SUCCESS is 0) except the three that return a
! Fortran string: gpuarena_strerror, gpuarena_last_error, gpuarena_version.
!
! Most entries are interfaces bound to the C functions; the string
! conversions are module procedures, compiled into libgpuarena_fortran.
! Keep gpuarena_stats_t in step with the C struct, field by field: the test
! tests/fortran/check-fortran-api.sh compares the two.
module gpuarena
  use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_intptr_t, c_size_t, c_ptr, &
       c_char, c_null_char, c_null_ptr, c_associated, c_f_pointer, c_loc
  implicit none
  private

  ! Version of the headers this module was built from.
  integer(c_int), parameter, public :: GPUARENA_VERSION_MAJOR = 0
  integer(c_int), parameter, public :: GPUARENA_VERSION_MINOR = 1
  integer(c_int), parameter, public :: GPUARENA_VERSION_PATCH = 0

  ! gpuarena_status_t
  integer(c_int), parameter, public :: GPUARENA_SUCCESS = 0
  integer(c_int), parameter, public :: GPUARENA_ERR_INVALID_ARGUMENT = 1
  integer(c_int), parameter, public :: GPUARENA_ERR_OUT_OF_MEMORY = 2
  integer(c_int), parameter, public :: GPUARENA_ERR_NO_DRIVER = 3
  integer(c_int), parameter, public :: GPUARENA_ERR_NO_DEVICE = 4
  integer(c_int), parameter, public :: GPUARENA_ERR_INVALID_DEVICE = 5
  integer(c_int), parameter, public :: GPUARENA_ERR_INVALID_POINTER = 6
  integer(c_int), parameter, public :: GPUARENA_ERR_DOUBLE_FREE = 7
  integer(c_int), parameter, public :: GPUARENA_ERR_INTERIOR_POINTER = 8
  integer(c_int), parameter, public :: GPUARENA_ERR_SIZE_OVERFLOW = 9
  integer(c_int), parameter, public :: GPUARENA_ERR_INVALID_STREAM = 10
  integer(c_int), parameter, public :: GPUARENA_ERR_CONFIG = 11
  integer(c_int), parameter, public :: GPUARENA_ERR_NOT_SUPPORTED = 12
  integer(c_int), parameter, public :: GPUARENA_ERR_STREAM_CAPTURE = 13
  integer(c_int), parameter, public :: GPUARENA_ERR_DRIVER = 14
  integer(c_int), parameter, public :: GPUARENA_ERR_SYSTEM = 15
  integer(c_int), parameter, public :: GPUARENA_ERR_HOST_MEMORY = 16
  integer(c_int), parameter, public :: GPUARENA_ERR_CORRUPT = 17
  integer(c_int), parameter, public :: GPUARENA_ERR_BUSY = 18

  ! gpuarena_kind_t
  integer(c_int), parameter, public :: GPUARENA_DEVICE = 0
  integer(c_int), parameter, public :: GPUARENA_PINNED = 1
  integer(c_int), parameter, public :: GPUARENA_MANAGED = 2
  integer(c_int), parameter, public :: GPUARENA_HOST = 3
  integer(c_int), parameter, public :: GPUARENA_SIM = 4
  integer(c_int), parameter, public :: GPUARENA_KIND_COUNT = 5

  ! Destination of gpuarena_prefetch meaning "the host".
  integer(c_int), parameter, public :: GPUARENA_CPU = -1

  ! The stream argument meaning no stream, the calling host thread: the
  ! C header's ((gpuarena_stream_t) ~(uintptr_t)0), all bits set.
  type(c_ptr), parameter, public :: GPUARENA_STREAM_HOST = transfer(-1_c_intptr_t, c_null_ptr)

  ! gpuarena_stats_t: 40 uint64_t in the order of the C struct.
  type, bind(c), public :: gpuarena_stats_t
     integer(c_int64_t) :: requested, requested_peak
     integer(c_int64_t) :: in_use, in_use_peak
     integer(c_int64_t) :: reserved, reserved_peak
     integer(c_int64_t) :: cached, cached_peak
     integer(c_int64_t) :: allocs
     integer(c_int64_t) :: frees
     integer(c_int64_t) :: cache_hits
     integer(c_int64_t) :: cache_misses
     integer(c_int64_t) :: provider_maps
     integer(c_int64_t) :: provider_unmaps
     integer(c_int64_t) :: cross_stream_waits
     integer(c_int64_t) :: oom_retries
     integer(c_int64_t) :: oom_failures
     integer(c_int64_t) :: last_oom_request
     integer(c_int64_t) :: segments
     integer(c_int64_t) :: live_blocks
     integer(c_int64_t) :: free_blocks
     integer(c_int64_t) :: pending_frees
     integer(c_int64_t) :: events_recorded
     integer(c_int64_t) :: trims
     integer(c_int64_t) :: numa_nodes
     integer(c_int64_t) :: numa_fallbacks
     integer(c_int64_t) :: prefetches
     integer(c_int64_t) :: prefetches_skipped
     integer(c_int64_t) :: advice_applied
     integer(c_int64_t) :: advice_skipped
     integer(c_int64_t) :: device_free
     integer(c_int64_t) :: stream_pools
     integer(c_int64_t) :: stream_cached
     integer(c_int64_t) :: retired_cached
     integer(c_int64_t) :: deferred_frees
     integer(c_int64_t) :: numa_unbound
     integer(c_int64_t) :: spare_(4)
  end type gpuarena_stats_t

  ! gpuarena_total_t: every arena of a kind on a device together.
  type, bind(c), public :: gpuarena_total_t
     integer(c_int64_t) :: arenas
     integer(c_int64_t) :: reserved, reserved_peak
     integer(c_int64_t) :: spare_(5)
  end type gpuarena_total_t

  public :: gpuarena_get, gpuarena_destroy, gpuarena_kind
  public :: gpuarena_alloc, gpuarena_free, gpuarena_record_stream
  public :: gpuarena_prefetch, gpuarena_trim
  public :: gpuarena_stats, gpuarena_stats_reset_peaks, gpuarena_check
  public :: gpuarena_stats_total, gpuarena_stats_total_reset_peak
  public :: gpuarena_init, gpuarena_create, gpuarena_set
  public :: gpuarena_strerror, gpuarena_last_error, gpuarena_version

  ! The C functions whose Fortran form is the same call.
  interface
     ! status = gpuarena_get(kind, device, arena)
     function gpuarena_get(kind, device, arena) bind(c, name='gpuarena_get') result(status)
       import :: c_int, c_ptr
       integer(c_int), value :: kind, device
       type(c_ptr), intent(out) :: arena
       integer(c_int) :: status
     end function gpuarena_get

     function gpuarena_destroy(arena) bind(c, name='gpuarena_destroy') result(status)
       import :: c_int, c_ptr
       type(c_ptr), value :: arena
       integer(c_int) :: status
     end function gpuarena_destroy

     function gpuarena_kind(arena, kind, device) bind(c, name='gpuarena_kind') result(status)
       import :: c_int, c_ptr
       type(c_ptr), value :: arena
       integer(c_int), intent(out) :: kind, device
       integer(c_int) :: status
     end function gpuarena_kind

     ! status = gpuarena_alloc(arena, size, stream, ptr); c_f_pointer(ptr, x, [n])
     function gpuarena_alloc(arena, size, stream, ptr) bind(c, name='gpuarena_alloc') &
          result(status)
       import :: c_int, c_ptr, c_size_t
       type(c_ptr), value :: arena
       integer(c_size_t), value :: size
       type(c_ptr), value :: stream
       type(c_ptr), intent(out) :: ptr
       integer(c_int) :: status
     end function gpuarena_alloc

     function gpuarena_free(arena, ptr, stream) bind(c, name='gpuarena_free') result(status)
       import :: c_int, c_ptr
       type(c_ptr), value :: arena, ptr, stream
       integer(c_int) :: status
     end function gpuarena_free

     function gpuarena_record_stream(arena, ptr, stream) bind(c, name='gpuarena_record_stream') &
          result(status)
       import :: c_int, c_ptr
       type(c_ptr), value :: arena, ptr, stream
       integer(c_int) :: status
     end function gpuarena_record_stream

     function gpuarena_prefetch(arena, ptr, size, destination, stream) &
          bind(c, name='gpuarena_prefetch') result(status)
       import :: c_int, c_ptr, c_size_t
       type(c_ptr), value :: arena, ptr
       integer(c_size_t), value :: size
       integer(c_int), value :: destination
       type(c_ptr), value :: stream
       integer(c_int) :: status
     end function gpuarena_prefetch

     function gpuarena_trim(arena, keep_bytes) bind(c, name='gpuarena_trim') result(status)
       import :: c_int, c_ptr, c_size_t
       type(c_ptr), value :: arena
       integer(c_size_t), value :: keep_bytes
       integer(c_int) :: status
     end function gpuarena_trim

     function gpuarena_stats(arena, stats) bind(c, name='gpuarena_stats') result(status)
       import :: c_int, c_ptr, gpuarena_stats_t
       type(c_ptr), value :: arena
       type(gpuarena_stats_t), intent(out) :: stats
       integer(c_int) :: status
     end function gpuarena_stats

     function gpuarena_stats_reset_peaks(arena) bind(c, name='gpuarena_stats_reset_peaks') &
          result(status)
       import :: c_int, c_ptr
       type(c_ptr), value :: arena
       integer(c_int) :: status
     end function gpuarena_stats_reset_peaks

     ! status = gpuarena_stats_total(kind, device, total)
     function gpuarena_stats_total(kind, device, total) bind(c, name='gpuarena_stats_total') &
          result(status)
       import :: c_int, gpuarena_total_t
       integer(c_int), value :: kind, device
       type(gpuarena_total_t), intent(out) :: total
       integer(c_int) :: status
     end function gpuarena_stats_total

     function gpuarena_stats_total_reset_peak(kind, device) &
          bind(c, name='gpuarena_stats_total_reset_peak') result(status)
       import :: c_int
       integer(c_int), value :: kind, device
       integer(c_int) :: status
     end function gpuarena_stats_total_reset_peak

     function gpuarena_check(arena) bind(c, name='gpuarena_check') result(status)
       import :: c_int, c_ptr
       type(c_ptr), value :: arena
       integer(c_int) :: status
     end function gpuarena_check
  end interface

  ! The C functions behind the module procedures below.
  interface
     function c_init(path) bind(c, name='gpuarena_init') result(status)
       import :: c_int, c_ptr
       type(c_ptr), value :: path
       integer(c_int) :: status
     end function c_init

     function c_create(kind, device, options, arena) bind(c, name='gpuarena_create') &
          result(status)
       import :: c_int, c_ptr
       integer(c_int), value :: kind, device
       type(c_ptr), value :: options
       type(c_ptr), intent(out) :: arena
       integer(c_int) :: status
     end function c_create

     function c_set(arena, options) bind(c, name='gpuarena_set') result(status)
       import :: c_int, c_ptr
       type(c_ptr), value :: arena, options
       integer(c_int) :: status
     end function c_set

     function c_strerror(status) bind(c, name='gpuarena_strerror') result(msg)
       import :: c_int, c_ptr
       integer(c_int), value :: status
       type(c_ptr) :: msg
     end function c_strerror

     function c_last_error() bind(c, name='gpuarena_last_error') result(msg)
       import :: c_ptr
       type(c_ptr) :: msg
     end function c_last_error

     function c_version() bind(c, name='gpuarena_version') result(msg)
       import :: c_ptr
       type(c_ptr) :: msg
     end function c_version

     function c_strlen(s) bind(c, name='strlen') result(n)
       import :: c_ptr, c_size_t
       type(c_ptr), value :: s
       integer(c_size_t) :: n
     end function c_strlen
  end interface

contains

  ! A copy of the NUL-terminated C string at cstr ('' for NULL).
  function from_c_string(cstr) result(s)
    type(c_ptr), intent(in) :: cstr
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: n, i

    if (.not. c_associated(cstr)) then
       s = ''
       return
    end if
    n = int(c_strlen(cstr))
    call c_f_pointer(cstr, chars, [n])
    allocate (character(len=n) :: s)
    do i = 1, n
       s(i:i) = chars(i)
    end do
  end function from_c_string

  ! Fill buf with the characters of s, trailing blanks left out (a path
  ! read into a fixed-length variable, as OPEN's FILE= takes it), and a
  ! NUL.
  subroutine to_c_string(s, buf)
    character(len=*), intent(in) :: s
    character(kind=c_char), allocatable, intent(out) :: buf(:)
    integer :: i, n

    n = len_trim(s)
    allocate (buf(n + 1))
    do i = 1, n
       buf(i) = s(i:i)
    end do
    buf(n + 1) = c_null_char
  end subroutine to_c_string

  ! What a status code means, as in gpuarena_strerror(3).
  function gpuarena_strerror(status) result(msg)
    integer(c_int), intent(in) :: status
    character(len=:), allocatable :: msg

    msg = from_c_string(c_strerror(status))
  end function gpuarena_strerror

  ! The details of the calling thread's last failure.
  function gpuarena_last_error() result(msg)
    character(len=:), allocatable :: msg

    msg = from_c_string(c_last_error())
  end function gpuarena_last_error

  ! The version of the library in use, "MAJOR.MINOR.PATCH".
  function gpuarena_version() result(msg)
    character(len=:), allocatable :: msg

    msg = from_c_string(c_version())
  end function gpuarena_version

  ! status = gpuarena_init([config_path]): read the configuration now, from
  ! config_path or, without it, from the search path of gpuarena.conf(5).
  function gpuarena_init(config_path) result(status)
    character(len=*), intent(in), optional :: config_path
    integer(c_int) :: status
    character(kind=c_char), allocatable, target :: buf(:)

    if (present(config_path)) then
       call to_c_string(config_path, buf)
       status = c_init(c_loc(buf))
    else
       status = c_init(c_null_ptr)
    end if
  end function gpuarena_init

  ! status = gpuarena_create(kind, device, arena [, options]): a private
  ! arena; options as in gpuarena_create(3), "key=value,...".
  function gpuarena_create(kind, device, arena, options) result(status)
    integer(c_int), intent(in) :: kind, device
    type(c_ptr), intent(out) :: arena
    character(len=*), intent(in), optional :: options
    integer(c_int) :: status
    character(kind=c_char), allocatable, target :: buf(:)

    if (present(options)) then
       call to_c_string(options, buf)
       status = c_create(kind, device, c_loc(buf), arena)
    else
       status = c_create(kind, device, c_null_ptr, arena)
    end if
  end function gpuarena_create

  ! status = gpuarena_set(arena, options): new caps of a live arena, as in
  ! gpuarena_set(3), "max_reserved=...,max_cached=...".
  function gpuarena_set(arena, options) result(status)
    type(c_ptr), intent(in) :: arena
    character(len=*), intent(in) :: options
    integer(c_int) :: status
    character(kind=c_char), allocatable, target :: buf(:)

    call to_c_string(options, buf)
    status = c_set(arena, c_loc(buf))
  end function gpuarena_set

end module gpuarena
